"""Steps whose worker died, closed even when nobody steps on their chat again.

A chat's next step sweeps a dead step before it reads the window (chat/steps.py, _SWEEP). A chat
that gets no next step would keep its dead step `running` and its partial answer `streaming`
for good: a frontend shows a reply that never ends, and `jin audit` reports it. Each worker runs
this loop; any of them may sweep any chat, and two that sweep at once take turns on the lease.
"""

from __future__ import annotations

import asyncio
import logging

from chat.steps import PostgresStepStore

log = logging.getLogger("jin.sweeper")


async def sweep_forever(steps: PostgresStepStore, every: float) -> None:
    """Sweep expired leases every `every` seconds (the lease TTL suits: a dead step is closed
    within two TTLs of its last heartbeat), until cancelled. A database that is away is
    waited out."""
    while True:
        await asyncio.sleep(every)
        try:
            swept = await steps.sweep_expired()
        except Exception as exc:  # the database blinked: the next round tries again
            log.warning("sweeping expired leases failed: %s: %s", type(exc).__name__, exc)
            continue
        if swept:
            log.info("closed the dead steps of %d chats", swept)
