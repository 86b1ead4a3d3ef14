"""Aborts between workers, pushed on the `jin_abort` channel (chat/channels.py).

The abort flag on the step row stays the record (a running step also polls it, so a lost
notification only costs one poll interval); the notification makes the common case immediate.
The NOTIFY is sent by the statement that sets the flag (chat/steps.py), in its transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from chat.channels import Channels, Notice

log = logging.getLogger("jin.abort")

CHANNEL = "jin_abort"


def listen_for_aborts(channels: Channels, on_abort: Callable[[uuid.UUID], None]) -> None:
    """Call `on_abort` with the step id of each abort any worker asks for."""

    def notified(notice: Notice) -> None:
        try:
            step_id = uuid.UUID(notice.payload)
        except ValueError:
            log.warning("ignoring a malformed abort notification: %r", notice.payload[:80])
            return
        on_abort(step_id)

    channels.listen(CHANNEL, notified)
