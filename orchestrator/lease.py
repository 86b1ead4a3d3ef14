"""Waiting for a chat's lease, the way the chat's busy policy says.

`reject` answers 409 at once; `queue` waits, bounded; `interrupt` asks the running step to stop,
then waits. A retry of the very request that is running (same idempotency key) always waits for
its outcome.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from chat.ports import LeaseBusy, LeaseMissing, StepStore
from orchestrator.errors import ChatBusy, ChatNotFound

T = TypeVar("T")


async def follow_policy(
    steps: StepStore,
    queue_wait: float,
    tenant_id: str,
    chat_id: uuid.UUID,
    idempotency_key: str | None,
    attempt: Callable[[], Awaitable[T | LeaseBusy | LeaseMissing]],
) -> T:
    """Call attempt() until it gets past the lease; raises ChatNotFound or ChatBusy."""
    deadline = time.monotonic() + queue_wait
    delay, asked_abort = 0.01, False
    while True:
        result = await attempt()
        if isinstance(result, LeaseMissing):
            raise ChatNotFound(f"chat {chat_id} does not exist")
        if not isinstance(result, LeaseBusy):
            return result
        retry = idempotency_key is not None and result.running_key == idempotency_key
        if result.busy_policy == "reject" and not retry:
            raise ChatBusy("another step is running on this chat")
        if result.busy_policy == "interrupt" and not retry and not asked_abort:
            # Asked again on each pass until the holder's step exists to be flagged.
            asked_abort = await steps.request_abort(tenant_id, chat_id) is not None
        if time.monotonic() + delay > deadline:
            raise ChatBusy("another step is still running on this chat; try again later")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.2)
