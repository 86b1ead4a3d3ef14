"""`/ws/chat?chat_id=...`: the JIN WebSocket protocol (api/ws_protocol.py).

A socket follows one chat: every step of it, started on this socket, another one or over HTTP,
on any worker, streams here (api/chat_feed.py). The socket's frames start steps and abort them
the way `POST /v1/chats/{id}/messages` and `/abort` do. A step started here runs on when its
socket closes (others may follow it; it is saved either way); `abort` stops it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from fastapi import APIRouter, WebSocket

from api import logs
from api.chat_feed import Follower, event_text
from api.runtime import Runtime
from api.sse import replay_events
from api.ws_protocol import (
    Abort,
    Mistake,
    Say,
    chosen_subprotocol,
    close_code,
    error_frame,
    read_frame,
)
from db.errors import is_outage
from orchestrator.answer import AbortSignal
from orchestrator.errors import StepError
from orchestrator.step import Replayed, StepRequest, run_step, start_step

log = logging.getLogger("jin.ws")

router = APIRouter()

LAGGING = 1013  # "try again later": the socket read too slowly to keep up with the stream
UNAVAILABLE = Mistake(503, "database_unavailable", "the database is not reachable; retry shortly")


@router.websocket("/ws/chat")
async def chat_socket(websocket: WebSocket) -> None:
    runtime: Runtime = websocket.app.state.runtime
    tenant: str = websocket.state.tenant
    await websocket.accept(subprotocol=chosen_subprotocol(websocket.scope))
    chat_id = _uuid(websocket.query_params.get("chat_id"))
    if chat_id is None:
        await _close(websocket, Mistake(422, "invalid_request", "`chat_id` must be a chat id"))
        return
    logs.chat_id.set(str(chat_id))
    try:
        chat = await runtime.deps.chats.get_chat(tenant, chat_id)
    except Exception as exc:
        if not is_outage(exc):
            raise
        await _close(websocket, UNAVAILABLE)
        return
    assert runtime.feed is not None  # (the lifespan sets it before the first request)
    if chat is None:
        await _close(websocket, Mistake(404, "chat_not_found", f"chat {chat_id} does not exist"))
        return
    async with runtime.feed.follow(chat_id) as follower:
        follower.queue.put_nowait(json.dumps({"type": "subscribed", "chat_id": str(chat_id)}))
        writer = asyncio.create_task(_write(websocket, follower))
        try:
            await _read(websocket, runtime, tenant, chat_id, follower)
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)


async def _read(websocket: WebSocket, runtime: Runtime, tenant: str, chat_id: uuid.UUID,
                follower: Follower) -> None:
    """The client's frames until it goes. A step opens beside the reading, so an abort is read
    while it waits for the chat; it is not cancelled when the socket goes (a step cut while it
    opens would hold the chat until its lease ran out), and the runtime's drain waits for it."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        frame = read_frame(message.get("text") or message.get("bytes"))
        if isinstance(frame, Mistake):
            follower.queue.put_nowait(error_frame(frame.code, frame.detail))
        elif isinstance(frame, Abort):
            follower.queue.put_nowait(await _abort(runtime, tenant, chat_id))
        else:
            task = asyncio.create_task(_start(websocket, runtime, tenant, chat_id, frame,
                                              follower))
            runtime.tasks.add(task)
            task.add_done_callback(runtime.tasks.discard)


async def _abort(runtime: Runtime, tenant: str, chat_id: uuid.UUID) -> str:
    """As `POST /v1/chats/{id}/abort`: the flag in Postgres, heard by the worker running it."""
    try:
        step_id = await runtime.deps.steps.request_abort(tenant, chat_id)
    except Exception as exc:
        if not is_outage(exc):
            raise
        return error_frame(UNAVAILABLE.code, UNAVAILABLE.detail)
    if step_id is not None:
        runtime.abort_local(step_id)  # other workers hear it through Postgres
    return json.dumps({"type": "abort_result", "aborted": step_id is not None,
                       "step_id": str(step_id) if step_id else None})


async def _start(websocket: WebSocket, runtime: Runtime, tenant: str, chat_id: uuid.UUID,
                 say: Say, follower: Follower) -> None:
    """Open the step and hand it to the runtime: its events reach this socket, and every other
    one following the chat, through the feed."""
    refusal = _over_limits(websocket, runtime)
    if refusal is not None:
        follower.queue.put_nowait(error_frame(refusal.code, refusal.detail))
        return
    try:
        started = await start_step(runtime.deps, StepRequest(tenant, chat_id, say.text,
                                                             say.idempotency_key))
    except StepError as exc:
        follower.queue.put_nowait(error_frame(exc.code, str(exc)))
        return
    except Exception as exc:
        if not is_outage(exc):
            log.exception("a step could not start")
            follower.queue.put_nowait(error_frame("internal_error", "the step could not start"))
            return
        follower.queue.put_nowait(error_frame(UNAVAILABLE.code, UNAVAILABLE.detail))
        return
    if isinstance(started, Replayed):  # an idempotent retry: told to this socket alone
        for event in replay_events(started.outcome):
            follower.queue.put_nowait(event_text(event))
        return
    abort = AbortSignal()
    runtime.collect(started.begun.step_id, run_step(runtime.deps, started, abort), abort,
                    _ignore)


def _ignore(_: Any) -> None:
    """The events go to the feed (Runtime.feed), not to the caller."""


def _over_limits(websocket: WebSocket, runtime: Runtime) -> Mistake | None:
    """A step over a socket counts like a POST: one of the key's rate, one of the worker's
    steps."""
    caller = websocket.state.caller
    limiter = websocket.app.state.limiter
    if caller.key_id is not None and limiter.take(caller.key_id) > 0:
        runtime.metrics.rate_limited.inc()
        return Mistake(429, "rate_limited", "this key is over its rate limit; retry later")
    max_steps = websocket.app.state.settings.max_concurrent_steps
    if len(runtime.running) >= max_steps:
        return Mistake(503, "too_many_steps", f"this worker runs {max_steps} steps already")
    return None


async def _write(websocket: WebSocket, follower: Follower) -> None:
    """The one writer of the socket: events and replies, in order."""
    while (text := await follower.queue.get()) is not None:
        await websocket.send_text(text)
    await websocket.send_text(error_frame("lagging",
                                          "the socket read too slowly to follow the stream"))
    await websocket.close(LAGGING, reason="lagging")


async def _close(websocket: WebSocket, mistake: Mistake) -> None:
    await websocket.send_text(error_frame(mistake.code, mistake.detail))
    await websocket.close(close_code(mistake.status), reason=mistake.code)


def _uuid(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None
