"""Chats: create, list, read, update, delete; what the next step would send; start over."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from api.routes.snapshots import snapshot_missing, snapshots_on
from api.schemas import (
    CURSOR,
    ChatOut,
    ChatPage,
    ContextOut,
    CreateChat,
    MessageOut,
    Text,
    UpdateChat,
    chat_json,
    decode_cursor,
    encode_cursor,
    message_json,
)
from chat.ports import NewChat
from chat.types import Chat, ModelSettings, Window
from llm.errors import LLMError
from orchestrator.compaction_policy import CompactionState, decide
from orchestrator.context import PromptPlan, assemble
from orchestrator.layers import place_layers, read_layers
from orchestrator.memory_recall import recall_into
from orchestrator.route import RouteConfig, plan_route
from orchestrator.snapshots import SnapshotNotFound
from orchestrator.step import StepDeps, budget_for, reset_chat

# Routes build their JSON with chat_json / message_json; the models only document it.
router = APIRouter(prefix="/v1/chats", tags=["chats"], responses=problems.responses(401, 429, 503))


def _missing(chat_id: uuid.UUID) -> Problem:
    return Problem(404, "chat_not_found", f"chat {chat_id} does not exist")


async def _chat(runtime: RuntimeDep, tenant: str, chat_id: uuid.UUID) -> Chat:
    chat = await runtime.deps.chats.get_chat(tenant, chat_id)
    if chat is None:
        raise _missing(chat_id)
    return chat


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        return decode_cursor(cursor)
    except ValueError as exc:
        raise Problem(422, "invalid_cursor", "the cursor is not one this API gave out") from exc


@router.post("", status_code=201, response_model=None,
             responses={201: {"model": ChatOut}, **problems.responses(400, 404, 413, 422)})
async def create_chat(body: CreateChat, runtime: RuntimeDep, tenant: TenantDep) -> dict[str, Any]:
    """A new chat; with `from_snapshot`, started from the user's L3 snapshot: its L1 starts as
    the snapshot's, and the snapshot's digest is fenced into its prompts."""
    new = NewChat(
        tenant_id=tenant,
        user_id=body.user_id,
        title=body.title,
        system_prompt=body.system_prompt,
        settings=ModelSettings(**body.settings.model_dump()),
        busy_policy=body.busy_policy,
        assistant=body.assistant,
    )
    if body.from_snapshot is None:
        return chat_json(await runtime.deps.chats.create_chat(new))
    l3 = snapshots_on(runtime)
    try:
        chat = await l3.start_chat(runtime.deps.chats, new, body.from_snapshot)
    except SnapshotNotFound as exc:
        raise snapshot_missing(body.from_snapshot) from exc
    return chat_json(chat)


@router.get("", response_model=None,
            responses={200: {"model": ChatPage}, **problems.responses(422)})
async def list_chats(
    runtime: RuntimeDep,
    tenant: TenantDep,
    user_id: Annotated[Text | None, Query(min_length=1, max_length=200)] = None,
    cursor: Annotated[str | None, Query(max_length=200, pattern=CURSOR,
                                        description="`next_cursor` of the previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JSONResponse:
    after = _decode_cursor(cursor) if cursor else None
    chats = await runtime.deps.chats.list_chats(tenant, user_id, after, limit + 1)
    page = chats[:limit]
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if len(chats) > limit else None
    # Plain JSON already: no generic encoder over every field of up to 200 chats.
    return JSONResponse({"chats": [chat_json(c) for c in page], "next_cursor": next_cursor})


@router.get("/{chat_id}", response_model=None,
            responses={200: {"model": ChatOut}, **problems.responses(404, 422)})
async def get_chat(chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep) -> dict[str, Any]:
    return chat_json(await _chat(runtime, tenant, chat_id))


@router.patch("/{chat_id}", response_model=None,
              responses={200: {"model": ChatOut}, **problems.responses(400, 404, 413, 422)})
async def update_chat(
    chat_id: uuid.UUID, body: UpdateChat, runtime: RuntimeDep, tenant: TenantDep
) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    if isinstance(changes.get("settings"), dict):
        changes["settings"] = {k: v for k, v in changes["settings"].items() if v is not None}
    chat = await runtime.deps.chats.update_chat(tenant, chat_id, changes)
    if chat is None:
        raise _missing(chat_id)
    return chat_json(chat)


@router.delete("/{chat_id}", status_code=204, responses=problems.responses(404, 422))
async def delete_chat(chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep) -> Response:
    if not await runtime.deps.chats.delete_chat(tenant, chat_id):
        raise _missing(chat_id)
    return Response(status_code=204)


@router.get("/{chat_id}/context", response_model=None,
            responses={200: {"model": ContextOut}, **problems.responses(404, 422)})
async def context(
    chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
    # The request line must fit uvicorn's parser (~64 KB): 4,000 characters percent-encode to
    # at most 48 KB. A longer message is only seen by the step itself.
    message: Annotated[Text | None, Query(max_length=4000)] = None,
) -> dict[str, Any]:
    """What the next step would send: sections, tokens, budget, what recall found and why
    (each item's dense, keyword, recency and weight scores). With `message`, the prompt as that
    message would make it; else without a new message, recalling for the last user message."""
    deps = runtime.deps
    chat = await _chat(runtime, tenant, chat_id)
    layers = read_layers(deps.layers(), chat)  # beside the window
    budget = budget_for(chat, deps.config)
    window = await deps.chats.load_window(chat, deps.config.window_read_rows, budget.total)
    plan = await place_layers(deps.layers(), layers,
                              assemble(window, message, budget, deps.counter))
    query = message if message is not None else _last_user_text(window)
    recall: dict[str, Any] = {"query": query, "enabled": deps.recall is not None}
    try:
        plan, result = await recall_into(deps.recall, deps.counter, chat, window, plan, query)
    except LLMError as exc:
        recall["error"] = f"{exc.code}: {exc}"
        result = None
    if result is not None:
        recall.update(mode=result.mode, candidates=result.candidates, timings=result.timings)
    return {
        "chat_id": str(chat.id),
        "messages": [m.to_openai() for m in plan.messages],
        "sections": [
            {"name": s.name, "tokens": s.tokens, "messages": len(s.messages),
             "ids": [str(i) for i in s.source_ids]}
            for s in plan.sections
        ],
        "total_tokens": plan.total_tokens,
        "budget": {
            "context_window": budget.context_window,
            "answer_reserve": budget.answer_reserve,
            "total": budget.total,
            "tail_tokens": budget.tail_tokens,
            "trigger": budget.trigger,
        },
        "summary": message_json(window.summary) if window.summary else None,
        "left_out": plan.left_out,
        "would_compact": plan.would_compact,
        "compaction": _compaction_view(runtime, chat, plan),
        "recalled": [item.to_json() for item in result.items] if result is not None else [],
        "recall": recall,
        # The planner's route for the message (or the last user message), and what the
        # translator made of the last user message that was translated, as its step kept it.
        "route": list(plan_route(query, "user", _route_config(deps)).nodes),
        "translation": _last_translation(window),
        "answer_translation": _last_answer_translation(window),
        "actions": _last_actions(window),
    }


def _route_config(deps: StepDeps) -> RouteConfig:
    return deps.config.route if deps.translator is not None else RouteConfig()


def _last_translation(window: Window) -> dict[str, Any] | None:
    """The translation of the newest user message in the window, which its step keeps in its
    answer's row: the brain read it for that step; the prompts after show the user's words."""
    at = next((i for i in range(len(window.tail) - 1, -1, -1)
               if window.tail[i].kind == "user"), None)
    if at is None:
        return None
    user = window.tail[at]
    answer = next((m for m in window.tail[at + 1:] if m.step_id == user.step_id
                   and m.kind == "assistant"), None)
    if answer is None or "translation" not in answer.meta:
        return None
    return {"message_id": str(user.id), **answer.meta["translation"]}


def _last_answer_translation(window: Window) -> dict[str, Any] | None:
    """The newest answer's translation into the user's language (JIN_TRANSLATE_ANSWER), as
    its step kept it: `source` is the brain's own answer, `text` the message's content."""
    answer = next((m for m in reversed(window.tail) if m.kind == "assistant"), None)
    if answer is None or "answer_translation" not in answer.meta:
        return None
    return {"message_id": str(answer.id), **answer.meta["answer_translation"]}


def _last_actions(window: Window) -> list[dict[str, Any]]:
    """The actions the newest answer in the window took (memory tools, runtime actions), as
    its step kept them in the answer's row."""
    answer = next((m for m in reversed(window.tail) if m.kind == "assistant"), None)
    return list(answer.meta.get("actions") or []) if answer is not None else []


def _last_user_text(window: Window) -> str:
    return next((m.content for m in reversed(window.tail) if m.kind == "user"), "")


def _compaction_view(runtime: RuntimeDep, chat: Chat, plan: PromptPlan) -> dict[str, Any]:
    """What compaction would do next and why, and the chat's counters."""
    state = CompactionState.from_json(chat.compaction)
    compactor = runtime.deps.compactor
    if compactor is None:
        return {"enabled": False, "state": state.to_json()}
    decision = decide(
        plan.total_tokens, plan.budget.total, bool(plan.left_out or plan.more_before), state,
        compactor.policy_for(chat),
    )
    return {"enabled": True, "next": decision.type, "reason": decision.reason,
            "state": state.to_json()}


@router.post("/{chat_id}/reset", status_code=201, response_model=None,
             responses={201: {"model": MessageOut}, **problems.responses(404, 409, 422)})
async def reset(chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep) -> dict[str, Any]:
    """The "start over" line: an empty summary row; the next step sees nothing before it.

    Written under the chat's lease, after a running step (or per the chat's busy policy)."""
    return message_json(await reset_chat(runtime.deps, tenant, chat_id))
