"""The durable-fact port. Pure: a protocol only."""

from __future__ import annotations

import uuid
from typing import Protocol


class FactStore(Protocol):
    """Durable facts of a user, kept across chats."""

    async def remember(
        self, tenant_id: str, user_id: str, facts: list[str], sources: list[uuid.UUID]
    ) -> int:
        """Write facts; one that exists already (same normalised text) is updated, not added.
        Returns how many were new."""
        ...
