"""Events of background work that may outlive its step (L1's update, L2's pass): awaited for a
while, else handed to listeners when they come (the chat's WebSocket fan-out)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

E = TypeVar("E")


async def wait_or_publish(task: asyncio.Task[E | None], wait: float,
                          publish: Callable[[E], None]) -> E | None:
    """The task's event if it ends within `wait` seconds; else None, and `publish` gets the
    event when the task ends (a task that failed, was cancelled or had none publishes
    nothing)."""
    done, _ = (await asyncio.wait({task}, timeout=wait)) if wait > 0 else (set(), set())
    if done:
        return task.result()

    def when_done(ended: asyncio.Task[E | None]) -> None:
        if not ended.cancelled() and ended.exception() is None \
                and (event := ended.result()) is not None:
            publish(event)

    task.add_done_callback(when_done)
    return None


def tell(listeners: list[Callable[[E], None]], event: E, log: logging.Logger,
         what: str) -> None:
    """Hand `event` to every listener: one listener's bug never keeps the others from
    hearing."""
    for listener in list(listeners):
        try:
            listener(event)
        except Exception:  # logged, and the next listener hears it all the same
            log.exception("a %s listener failed", what)
