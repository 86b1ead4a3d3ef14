"""The OpenAI-compatible routes: `POST /v1/chat/completions` and `GET /v1/models`.

A translation layer over the native step (orchestrator/step.py), which assembles, streams,
persists and compacts exactly as for `POST /v1/chats/{id}/messages`. Here: the request names a
chat and a user (api/openai_history.py), only the turns jin lacks are stored, and the step's
events go back as OpenAI's chunks (api/openai_wire.py). Errors are OpenAI's error objects
(api/openai_errors.py rewrites the problem documents raised here).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from api.deps import RuntimeDep, TenantDep
from api.openai_history import (
    Append,
    HistoryError,
    Turn,
    align,
    chat_id_for,
    digests,
    marks,
    split_system,
    turns_of,
)
from api.openai_wire import (
    ERROR_SCHEMA,
    ChatCompletionIn,
    Chunks,
    Completion,
    ModelOut,
    ModelsOut,
    completion_id,
    error_body,
)
from api.problems import Problem
from api.routes.messages import (
    KEEPALIVE,
    NOTHING_YET,
    SSE_HEADERS,
    StepJSON,
    next_event,
    until_done,
)
from chat.ports import ImportedMessage, NewChat, Transcript, TranscriptStore
from chat.types import POSITION_GAP, ModelSettings
from orchestrator.answer import AbortSignal, ClientTools
from orchestrator.errors import HistoryMoved
from orchestrator.step import (
    Started,
    StepDeps,
    StepRequest,
    reset_chat,
    run_step,
    start_step,
)

DEFAULT_USER = "default"  # the memory's user when a request names none
# The stored rows compared with the client's list: its end, at most _COMPARED rows (five
# exchanges: the odds that an edited list ends exactly as jin's does for that long are nil),
# and _SLACK more for unfinished answers the client may not have. (Reading as many rows as
# the client sent decoded a 20-turn chat's 40 rows on every request, for the rare edit in
# the middle of a list that ends as jin's does: a change further back is found by the digest
# each stored turn keeps of the list up to it, api/openai_history.py.)
_COMPARED = 10
_SLACK = 4
_TITLE_CHARS = 80
_NAME_CHARS = 200  # a user or chat name given in a header
# A failed answer's HTTP status when nothing was streamed yet.
_STATUS = {"answer_not_saved": 503, "database_unavailable": 503, "lease_lost": 409}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"description": "An OpenAI error object; `code` is jin's stable code",
                "content": {"application/json": {"schema": ERROR_SCHEMA}}} for s in statuses}


router = APIRouter(prefix="/v1", tags=["openai"], responses=_errors(401, 429, 503))


@router.get("/models", response_model=ModelsOut)
async def models(runtime: RuntimeDep) -> ModelsOut:
    """`jin` and the brain's own model id; both answer through jin with its memory."""
    brain = runtime.providers.get("brain")
    names = ["jin", *([brain.model] if brain is not None and hasattr(brain, "model") else [])]
    return ModelsOut(data=[ModelOut(id=n, created=0, owned_by="jin") for n in dict.fromkeys(names)])


_COMPLETION = {"description": "A `chat.completion`; with `stream: true`, `chat.completion.chunk` "
               "events ending in `data: [DONE]`",
               "content": {"application/json": {"schema": {"type": "object"}},
                           "text/event-stream": {"schema": {"type": "string"}}}}


@router.post("/chat/completions", response_model=None,
             responses={200: _COMPLETION, **_errors(400, 404, 409, 413)})
async def chat_completions(
    body: ChatCompletionIn, request: Request, runtime: RuntimeDep, tenant: TenantDep,
) -> StreamingResponse | StepJSON:
    """Run a step of jin's memory for an OpenAI client: the chat is named by the
    `X-Jin-Chat-Id` header or `metadata.chat_id`, else by the conversation's start; the user
    by the `X-Jin-User-Id` header or `user`. Answers carry `X-Jin-Chat-Id` (the chat's id)
    and `X-Jin-History` (`new`, `appended` or `reset`)."""
    # (Headers read here, not declared as parameters: an app's OpenAI client sends them as
    # extra headers, and the spec's fuzzing then keeps the key apart from them.)
    x_jin_user_id = _header(request, "x-jin-user-id")
    x_jin_chat_id = _header(request, "x-jin-chat-id")
    try:
        turns = turns_of(body.messages)
    except HistoryError as exc:
        raise Problem(400, "invalid_messages", str(exc)) from exc
    system, conversation = split_system(turns)
    if not conversation or conversation[-1].role not in ("user", "tool"):
        raise Problem(400, "invalid_messages",
                      "the last message must be the user's, or a tool's result")
    user = x_jin_user_id or body.user
    named = x_jin_chat_id or (body.metadata or {}).get("chat_id") or None
    assert runtime.transcripts is not None  # (api/app.py wires it)
    tools = ClientTools(body.tools, body.tool_choice) if body.tools else None
    received_at = getattr(request.state, "received_at", None)
    deps = runtime.deps
    for _ in range(2):
        transcript = await _transcript(runtime.transcripts, tenant, user, named, system,
                                       conversation)
        try:
            history, started = await _store_new(deps, transcript, named, system, conversation,
                                                tools, received_at, body.generation())
            break
        except HistoryMoved as exc:
            # Another request wrote to the chat between our read and our write: compare with
            # what it holds now (a request of the same history finds its message there).
            moved = exc
    else:
        raise Problem(409, "chat_busy", "other requests keep writing to this chat; retry "
                      "when they end") from moved
    chat = started.chat
    step_id = started.begun.step_id
    headers = {"X-Jin-Chat-Id": str(chat.id), "X-Jin-History": history}
    abort = AbortSignal()
    steps = run_step(deps, started, abort)
    if not body.stream:
        completion = Completion(completion_id(step_id), body.model)
        await until_done(runtime.collect(step_id, steps, abort, completion.add), request, abort)
        error = completion.error
        if error is not None and not completion.content:
            status = 502 if error.code.startswith("provider_") else _STATUS.get(error.code, 500)
            return StepJSON(error_body(status, error.code, error.text), status_code=status,
                            headers=headers)
        return StepJSON(completion.json(), headers=headers)

    queue = runtime.launch(step_id, steps, abort)
    keepalive = request.app.state.settings.sse_keepalive_seconds
    usage = body.stream_options is not None and body.stream_options.include_usage
    chunks = Chunks(completion_id(step_id), body.model, include_usage=usage)

    async def stream() -> AsyncIterator[bytes]:
        finished = False
        try:
            yield chunks.first()
            while (event := await next_event(queue, keepalive)) is not None:
                if event is NOTHING_YET:
                    yield KEEPALIVE
                elif (data := chunks.encode(event)) is not None:
                    yield data
            yield chunks.done()
            finished = True
        finally:
            if not finished:
                abort.set("client_disconnected")

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={**SSE_HEADERS, **headers})


async def _store_new(
    deps: StepDeps, transcript: Transcript, named: str | None, system: str,
    conversation: list[Turn], tools: ClientTools | None, received_at: float | None,
    settings: ModelSettings | None,
) -> tuple[str, Started]:
    """Store what the chat lacks of the client's conversation, and open the step on its last
    message; what it did to the history (`new`, `appended`, `reset`) and the step. Every write
    names the chat's position it was decided from, so that two requests that read the chat
    alike never both store a message: the one behind gets HistoryMoved, and reads again."""
    chat, tenant, position = transcript.chat, transcript.chat.tenant_id, transcript.last_position
    if system and system != chat.system_prompt:  # the client's system prompt is the chat's
        await deps.chats.update_chat(tenant, chat.id, {"system_prompt": system})
    history, new = "appended" if transcript.rows else "new", conversation
    sums = digests(conversation)
    decision = align(transcript.rows, transcript.more_before, conversation, sums)
    if isinstance(decision, Append) and decision.new:
        new = decision.new
    elif isinstance(decision, Append) and transcript.rows[-1].status == "streaming":
        # Its last message is stored and a step is answering it: the same request again (a
        # client's retry, a second tab). Stored once; the step's answer goes to the first. Not
        # to be retried (`x-should-retry`, which OpenAI's SDKs obey; they retry a 409 by
        # default): once the answer is stored, the same history without it is a regenerate.
        raise Problem(409, "chat_busy", "this message is being answered by a request with the "
                      "same history; its answer goes to that request",
                      headers={"x-should-retry": "false"})
    elif not (named is not None and len(conversation) == 1):
        # An edit or a regenerate: a "start over" line, and the client's conversation after
        # it. (A lone message to a named chat is a new turn: clients that send only that.)
        history = "reset"
        line = await reset_chat(deps, tenant, chat.id, {"reason": "client_history_changed"},
                                expect_position=position)
        position = line.position
    earlier, last = new[:-1], new[-1]
    first = len(conversation) - len(new)  # (what is new is the end of the client's list)
    if earlier:
        now = datetime.now(UTC)
        rows = [ImportedMessage(t.role, t.content, deps.counter.count(t.content), now,
                                marks(t, first + n, sums)) for n, t in enumerate(earlier)]
        if await deps.chats.import_messages(tenant, chat.id, rows, position) is None:
            # (A step holds the chat, or another request wrote: either way, read it again.)
            raise HistoryMoved(f"chat {chat.id} moved past position {position}")
        position += len(rows) * POSITION_GAP  # (each imported row takes the next position)
    started = await start_step(deps, StepRequest(
        tenant, chat.id, last.content, None, received_at,
        kind="tool" if last.role == "tool" else "user",
        meta=marks(last, len(conversation) - 1, sums), client_tools=tools,
        await_memory=False, expect_position=position, settings=settings))
    assert isinstance(started, Started)  # (no idempotency key: never a replay)
    return history, started


async def _transcript(
    store: TranscriptStore, tenant: str, user: str | None, named: str | None, system: str,
    conversation: list[Turn],
) -> Transcript:
    """The chat the request lands in, made when new, with the end of its conversation. A name
    that is the id of one of the tenant's chats is that chat."""
    limit = min(len(conversation), _COMPARED) + _SLACK
    if named is not None and (given := _uuid(named)) is not None:
        transcript = await store.read(tenant, given, limit)
        if transcript is not None:
            if user is not None and user != transcript.chat.user_id:
                raise Problem(409, "chat_user_mismatch",
                              f"chat {given} belongs to another user than {user!r}")
            return transcript
    user = user or DEFAULT_USER
    chat_id = chat_id_for(tenant, user, named, system, conversation)
    transcript = await store.read(tenant, chat_id, limit)
    if transcript is not None:
        return transcript
    first = next((t.content for t in conversation if t.role == "user"), "")
    chat = await store.ensure_chat(chat_id, NewChat(
        tenant, user, first[:_TITLE_CHARS], system, ModelSettings(), "queue"))
    if chat is None:
        raise Problem(404, "chat_not_found", f"chat {chat_id} is not this tenant's")
    # (A chat just made has no rows; one a concurrent request made first may have, and then
    # the position expected sends this request round again.)
    return Transcript(chat, [], False, last_position=0)


def _header(request: Request, name: str) -> str | None:
    value = request.headers.get(name, "").strip()
    if len(value) > _NAME_CHARS:
        raise Problem(400, "invalid_header", f"{name} is over {_NAME_CHARS} characters")
    return value or None


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
