"""What one worker process holds while it runs: clients, stores, and its in-flight steps.

Nothing here is state of a chat: any worker can serve any step. The registry of local steps only
makes an abort posted to this worker immediate; other workers see it through Postgres.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from api import logs
from api.chat_feed import ChatFeed
from api.metrics import Metrics
from api.role_status import RoleProbe
from chat.ports import TranscriptStore
from llm.types import ProviderConfig
from memory.events.compressor import Compressor
from memory.events.extractor import Extractor
from memory.events.listing import EventListing
from memory.indexer import Indexer
from orchestrator.answer import AbortSignal
from orchestrator.events import MessageError, StepEvent, StepStart
from orchestrator.step import StepDeps

log = logging.getLogger("jin.runtime")


@dataclass
class Runtime:
    engine: AsyncEngine
    deps: StepDeps
    providers: dict[str, ProviderConfig | dict[str, Any]]
    metrics: Metrics = field(default_factory=Metrics)
    memory_problem: str | None = None  # why memory is off, when it is
    memory_warning: str | None = None  # what memory lacks while on (api/app.py _other_vectors)
    transcripts: TranscriptStore | None = None  # for the OpenAI-compatible route
    probe: RoleProbe | None = None  # whether each role's server answers (/v1/status)
    indexer: Indexer | None = None  # told of each step, so that it backfills between them
    running: dict[uuid.UUID, AbortSignal] = field(default_factory=dict)  # by step id
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    feed: ChatFeed | None = None  # each event of a step, to the sockets following its chat
    # Event and entity extraction: told of each chat whose step ended (never waited for).
    extractor: Extractor | None = None
    event_listing: EventListing | None = None  # /v1/events and /v1/entities
    compressor: Compressor | None = None  # TIME_COMPRESS, with event memory (/v1/status)

    def abort_local(self, step_id: uuid.UUID) -> None:
        """An abort for a step: acted on if this worker runs it (from the route or a NOTIFY)."""
        signal = self.running.get(step_id)
        if signal is not None:
            signal.set("aborted")

    def launch(
        self, step_id: uuid.UUID, events: AsyncIterator[StepEvent], abort: AbortSignal
    ) -> asyncio.Queue[StepEvent | None]:
        """Run a step in its own task, so a client that goes away cannot cut a write short;
        its events come through the queue, then None."""
        queue: asyncio.Queue[StepEvent | None] = asyncio.Queue()
        self._start(step_id, events, abort, queue.put_nowait)
        return queue

    def collect(
        self, step_id: uuid.UUID, events: AsyncIterator[StepEvent], abort: AbortSignal,
        add: Callable[[StepEvent], None],
    ) -> asyncio.Task[None]:
        """As launch, for a client that wants the outcome alone: each event goes to `add` as it
        comes, and the task ends with the step (no queue to wake a reader per event)."""

        def emit(event: StepEvent | None) -> None:
            if event is not None:
                add(event)

        return self._start(step_id, events, abort, emit)

    def _start(
        self, step_id: uuid.UUID, events: AsyncIterator[StepEvent], abort: AbortSignal,
        emit: Callable[[StepEvent | None], None],
    ) -> asyncio.Task[None]:
        self.running[step_id] = abort
        self._steps_seen()
        task = asyncio.create_task(self._drive(step_id, events, emit))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _drive(
        self, step_id: uuid.UUID, events: AsyncIterator[StepEvent],
        emit: Callable[[StepEvent | None], None],
    ) -> None:
        logs.step_id.set(str(step_id))  # this task's own context: every line it logs names it
        self.metrics.steps_running.inc()
        chat_id: uuid.UUID | None = None

        def tell(event: StepEvent) -> None:
            emit(event)
            if self.feed is not None and chat_id is not None:
                self.feed.publish(chat_id, event)

        try:
            async for event in events:
                self.metrics.observe(event)
                if isinstance(event, StepStart):  # (a step's first event)
                    chat_id = event.chat_id
                tell(event)
        except Exception:  # the streaming boundary: a last event and a log line
            log.exception("step failed unexpectedly")
            # The client learns that it failed, not how: details are for the log.
            tell(MessageError(None, "internal_error", "the step failed unexpectedly"))
        finally:
            self.metrics.steps_running.dec()
            self.running.pop(step_id, None)
            self._steps_seen()
            emit(None)
            if self.extractor is not None and chat_id is not None:
                self.extractor.turn_done(chat_id)

    def _steps_seen(self) -> None:
        # The worker's indexer leaves backfill (imports) alone while steps run here.
        if self.indexer is not None:
            self.indexer.step_seen()

    async def drain(self, grace: float = 30.0) -> None:
        """On shutdown: ask running steps to stop and wait for them to persist."""
        for abort in self.running.values():
            abort.set("shutdown")
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=grace)
