"""Running a step (SSE or JSON), the full history, and abort."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, get_args

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from api.schemas import AbortOut, HistoryPage, PostMessage, StepOut, message_json
from api.sse import StepResult, frame, replay_events
from chat.types import MAX_POSITION
from orchestrator.answer import AbortSignal
from orchestrator.events import StepEvent
from orchestrator.step import Replayed, StepRequest, run_step, start_step

router = APIRouter(prefix="/v1/chats", tags=["messages"],
                   responses=problems.responses(401, 429, 503))

DISCONNECT_CHECK = 0.25  # seconds between looks at a JSON client's connection
NOTHING_YET: Any = object()
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE = b": keep-alive\n\n"


class StepJSON(JSONResponse):
    """A step's outcome as JSON, written by orjson (json.dumps of it was ~1% of a worker's CPU
    at 32 concurrent chats); what orjson cannot write (an integer past 64 bits in a provider's
    usage) goes the standard way."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # orjson.JSONEncodeError is one
            return super().render(content)


def _wants_sse(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


_EVENT = {  # one server-sent event: `event:` names it, `data:` is its JSON
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": sorted(kind.type for kind in get_args(StepEvent))},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
_STEP_ANSWER = {
    "model": StepOut,
    "description": "The finished step as JSON; with `Accept: text/event-stream`, its events",
    "content": {"text/event-stream": {"itemSchema": _EVENT}},
}


@router.post("/{chat_id}/messages", response_model=None,
             responses={200: _STEP_ANSWER, **problems.responses(400, 404, 409, 413, 422)})
async def post_message(
    chat_id: uuid.UUID, body: PostMessage, request: Request, runtime: RuntimeDep,
    tenant: TenantDep,
) -> StreamingResponse | StepJSON:
    """Run a step. Lease, idempotency and size are settled before any byte is streamed."""
    received_at = getattr(request.state, "received_at", None)
    started = await start_step(
        runtime.deps,
        StepRequest(tenant, chat_id, body.content, body.idempotency_key, received_at),
    )
    if isinstance(started, Replayed):
        events: list[StepEvent] = replay_events(started.outcome)
        if _wants_sse(request):
            return StreamingResponse(
                _replay(events), media_type="text/event-stream", headers=SSE_HEADERS
            )
        result = StepResult(replayed=True)
        for event in events:
            result.add(event)
        return StepJSON(result.json())

    abort = AbortSignal()
    steps = run_step(runtime.deps, started, abort)
    if not _wants_sse(request):
        result = StepResult()
        await until_done(runtime.collect(started.begun.step_id, steps, abort, result.add),
                          request, abort)
        return StepJSON(result.json())

    queue = runtime.launch(started.begun.step_id, steps, abort)
    keepalive = request.app.state.settings.sse_keepalive_seconds

    async def stream() -> AsyncIterator[bytes]:
        finished = False
        try:
            while (event := await next_event(queue, keepalive)) is not None:
                # A comment line while the model is silent: proxies and load balancers
                # close connections that stay quiet past their idle timeout.
                yield KEEPALIVE if event is NOTHING_YET else frame(event)
            finished = True
        finally:
            if not finished:
                abort.set("client_disconnected")

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


async def next_event(queue: asyncio.Queue[StepEvent | None], wait: float) -> Any:
    """The next event, or NOTHING_YET after `wait` seconds without one."""
    try:
        return queue.get_nowait()  # (what is already there needs no timer or task)
    except asyncio.QueueEmpty:
        try:
            return await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            return NOTHING_YET


async def until_done(task: asyncio.Task[None], request: Request, abort: AbortSignal) -> None:
    """Wait for the step; a client that goes away meanwhile stops it, and it still persists
    what it has."""
    while not (await asyncio.wait({task}, timeout=DISCONNECT_CHECK))[0]:
        if not abort.event.is_set() and await request.is_disconnected():
            abort.set("client_disconnected")


async def _replay(events: list[StepEvent]) -> AsyncIterator[bytes]:
    for event in events:
        yield frame(event)


@router.get("/{chat_id}/messages", response_model=None,
            responses={200: {"model": HistoryPage}, **problems.responses(404, 422)})
async def history(
    chat_id: uuid.UUID,
    runtime: RuntimeDep,
    tenant: TenantDep,
    before: Annotated[int | None, Query(ge=0, le=MAX_POSITION)] = None,
    after: Annotated[int | None, Query(ge=-1, le=MAX_POSITION)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JSONResponse:
    """Every row, summary rows and markers included, in position order, by keyset pages."""
    page = await runtime.deps.chats.list_messages(
        tenant, chat_id, before=before, after=after, limit=limit
    )
    if page is None:
        raise Problem(404, "chat_not_found", f"chat {chat_id} does not exist")
    rows = page.messages
    # Already plain JSON types: answered as they are, without FastAPI's generic encoder walking
    # 200 rows field by field (most of a page's time).
    return JSONResponse({
        "messages": [message_json(m) for m in rows],
        "has_more": page.has_more,
        "first_position": rows[0].position if rows else None,
        "last_position": rows[-1].position if rows else None,
    })


@router.post("/{chat_id}/abort", response_model=None,
             responses={200: {"model": AbortOut}, **problems.responses(404, 422)})
async def abort(chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep) -> dict[str, Any]:
    """Stop the chat's running step, whichever worker runs it."""
    if await runtime.deps.chats.get_chat(tenant, chat_id) is None:
        raise Problem(404, "chat_not_found", f"chat {chat_id} does not exist")
    step_id = await runtime.deps.steps.request_abort(tenant, chat_id)
    if step_id is not None:
        runtime.abort_local(step_id)  # other workers hear it through Postgres
    return {"aborted": step_id is not None, "step_id": str(step_id) if step_id else None}
